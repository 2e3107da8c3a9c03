//! An ADK agent's `/run_sse` events → [`AdkEvent`]s.
//!
//! What ADK sends (google-adk 2.x, recorded in `tests/fixtures/providers/adk/`):
//! one `data: <Event JSON>` per event and no end marker. With streaming on,
//! a model response comes as `partial: true` events holding deltas, then
//! one `partial: false` event with the same event id repeating all of it:
//! its text is not sent twice, and calls are read only from it (only it is
//! executed). A function response whose id is in
//! `actions.requestedToolConfirmations` is ADK's placeholder for a call it
//! asks about, not a result. Failures are an event with `errorCode`, or a
//! last line `{"error": …}` that is not an event at all.

use serde::Deserialize;
use serde_json::{Map, Value};
use sse_stream::Sse;

use super::PROVIDER;
use crate::call::ToolCall;
use crate::protocol::message::CONFIRMATION_TOOL;
use crate::provider::ProviderError;
use crate::provider::gemini::Content;
use crate::provider::http::{Decoder, Logged};

/// One thing an ADK agent did, in the order its events said it.
#[derive(Debug, Clone, PartialEq)]
pub enum AdkEvent {
    /// A model call of the agent began: a step.
    Step,
    TextDelta(String),
    ReasoningDelta(String),
    /// The agent's model called a tool; ADK runs it, or asks first.
    Call(ToolCall),
    /// A tool ADK ran returned `output`.
    Output {
        id: String,
        name: String,
        output: Value,
    },
    /// ADK asks whether a call may run.
    Confirm(Confirmation),
}

/// ADK's `adk_request_confirmation` call: the question about `original`.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    /// The confirmation call's id; the answer goes back under it.
    pub id: String,
    pub original: ToolCall,
    pub hint: Option<String>,
    /// What the tool asked to have filled in (`request_confirmation(payload=…)`).
    pub payload: Option<Value>,
}

impl Logged for AdkEvent {
    fn log(&self, _provider: &'static str) {}
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    id: Option<String>,
    content: Option<Content<Part>>,
    #[serde(default)]
    partial: bool,
    #[serde(default)]
    actions: Actions,
    error_code: Option<String>,
    error_message: Option<String>,
    /// Only on model responses.
    model_version: Option<String>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Actions {
    #[serde(default)]
    requested_tool_confirmations: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    function_call: Option<FunctionCall>,
    function_response: Option<FunctionResponse>,
}

#[derive(Deserialize)]
struct FunctionCall {
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: Value,
}

#[derive(Deserialize)]
struct FunctionResponse {
    id: Option<String>,
    name: String,
    #[serde(default)]
    response: Value,
}

/// The line ADK ends a failed stream with: not an event.
#[derive(Deserialize)]
struct Failure {
    error: Value,
    #[serde(default)]
    error_details: Option<FailureDetails>,
}

#[derive(Deserialize)]
struct FailureDetails {
    error_type: Option<String>,
}

/// `args` of an `adk_request_confirmation` call.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfirmationArgs {
    original_function_call: FunctionCall,
    #[serde(default)]
    tool_confirmation: ToolConfirmation,
}

#[derive(Deserialize, Default)]
struct ToolConfirmation {
    hint: Option<String>,
    payload: Option<Value>,
}

#[derive(Default)]
pub struct Decode {
    /// The event id of the model response whose partial events were read:
    /// its final event repeats what they held.
    streamed: Option<String>,
    /// The event id of the model response being read, to tell a new step.
    model: Option<String>,
}

impl Decode {
    pub fn new() -> Self {
        Self::default()
    }

    fn model_event(&mut self, event: &Event, out: &mut Vec<AdkEvent>) {
        let is_model = event.model_version.is_some() || event.finish_reason.is_some();
        if !is_model {
            return;
        }
        // A model response without an id still is a step of its own.
        if event.id.is_none() || event.id != self.model {
            self.model = event.id.clone();
            out.push(AdkEvent::Step);
        }
    }

    fn decode(&mut self, event: Event, out: &mut Vec<AdkEvent>) -> Result<(), ProviderError> {
        if let Some(code) = event.error_code {
            let message = event.error_message.unwrap_or_default();
            return Err(failed(&code, &message));
        }
        self.model_event(&event, out);
        let Some(content) = event.content else {
            // `endOfAgent` and other events without content.
            return Ok(());
        };
        let repeated = !event.partial && event.id.is_some() && self.streamed == event.id;
        if event.partial {
            self.streamed = event.id.clone();
        }
        for part in content.parts {
            if let Some(call) = part.function_call {
                // Only the final event's calls are executed; the partial's
                // come again there.
                if !event.partial {
                    out.push(call_event(call)?);
                }
                continue;
            }
            if let Some(response) = part.function_response {
                let id = response.id.unwrap_or_default();
                if event.actions.requested_tool_confirmations.contains_key(&id) {
                    continue;
                }
                out.push(AdkEvent::Output {
                    id,
                    name: response.name,
                    output: response.response,
                });
                continue;
            }
            match part.text {
                Some(text) if text.is_empty() || repeated => {}
                Some(text) if part.thought => out.push(AdkEvent::ReasoningDelta(text)),
                Some(text) => out.push(AdkEvent::TextDelta(text)),
                None => {}
            }
        }
        Ok(())
    }
}

/// A call, or ADK's question about one.
fn call_event(call: FunctionCall) -> Result<AdkEvent, ProviderError> {
    let id = call
        .id
        .filter(|id| !id.is_empty())
        .ok_or_else(|| ProviderError::Stream(format!("{PROVIDER} sent a call without an id")))?;
    if call.name != CONFIRMATION_TOOL {
        let args = match call.args {
            Value::Null => Value::Object(Map::new()),
            args => args,
        };
        let name = call.name;
        return Ok(AdkEvent::Call(ToolCall { id, name, args }));
    }
    let asked: ConfirmationArgs = serde_json::from_value(call.args).map_err(|e| {
        ProviderError::Stream(format!("{PROVIDER} sent an unreadable confirmation: {e}"))
    })?;
    let original = asked.original_function_call;
    if original.name == CONFIRMATION_TOOL {
        return Err(ProviderError::Stream(format!(
            "{PROVIDER} asked about a question"
        )));
    }
    let original_id = original.id.filter(|id| !id.is_empty()).ok_or_else(|| {
        ProviderError::Stream(format!("{PROVIDER} asked about a call without an id"))
    })?;
    let args = match original.args {
        Value::Null => Value::Object(Map::new()),
        args => args,
    };
    Ok(AdkEvent::Confirm(Confirmation {
        id,
        original: ToolCall {
            id: original_id,
            name: original.name,
            args,
        },
        hint: asked.tool_confirmation.hint.filter(|h| !h.is_empty()),
        payload: asked.tool_confirmation.payload,
    }))
}

/// What the client reads of a failure inside the agent: its Python error
/// type at most (`ValueError`). The message may name the server's files
/// or data; it goes to the log.
fn failed(kind: &str, message: &str) -> ProviderError {
    tracing::warn!(provider = PROVIDER, kind, "the agent failed: {message}");
    let kind = kind
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        .then_some(kind)
        .filter(|k| !k.is_empty() && k.len() <= 64)
        .unwrap_or("error");
    ProviderError::Upstream {
        provider: PROVIDER,
        message: format!("the agent failed ({kind})"),
    }
}

impl Decoder for Decode {
    type Event = AdkEvent;

    fn event(&mut self, event: Sse, out: &mut Vec<AdkEvent>) -> Result<bool, ProviderError> {
        let Some(data) = event.data else {
            return Ok(false);
        };
        let value: Value = serde_json::from_str(&data).map_err(|e| {
            ProviderError::Stream(format!("{PROVIDER} sent an unreadable event: {e}"))
        })?;
        if value.get("error").is_some() && value.get("invocationId").is_none() {
            let failure: Failure = serde_json::from_value(value).map_err(|e| {
                ProviderError::Stream(format!("{PROVIDER} sent an unreadable error: {e}"))
            })?;
            let kind = failure
                .error_details
                .and_then(|d| d.error_type)
                .unwrap_or_default();
            let message = match failure.error {
                Value::String(message) => message,
                other => other.to_string(),
            };
            return Err(failed(&kind, &message));
        }
        let event: Event = serde_json::from_value(value).map_err(|e| {
            ProviderError::Stream(format!("{PROVIDER} sent an unreadable event: {e}"))
        })?;
        self.decode(event, out)?;
        Ok(false)
    }

    /// ADK has no end marker: the body's end is the turn's.
    fn end(&mut self, _out: &mut Vec<AdkEvent>) -> Result<(), ProviderError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
