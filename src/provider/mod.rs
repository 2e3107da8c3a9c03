//! Model providers: provider-neutral messages in, a stream of
//! [`ProviderEvent`]s out. One file per provider.

pub mod adk;
pub mod anthropic;
pub mod gemini;
pub mod http;
pub mod measured;
pub mod openai;
pub mod scripted;

use std::task::Poll;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;

pub use scripted::ScriptedModel;

use crate::call::{ToolCall, ToolSpec, denial_text};
use crate::protocol::DeltaText;

/// The history as every provider sees it. The `adk_request_confirmation`
/// wrapper never appears here: the model sees its own call and the result.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelMessage {
    System(String),
    User(Vec<UserContent>),
    Assistant(Vec<AssistantContent>),
    Tool(Vec<ToolResult>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum UserContent {
    Text(String),
    File { media_type: String, url: String },
}

#[derive(Debug, Clone, PartialEq)]
pub enum AssistantContent {
    Text(String),
    /// `metadata` is the `providerMetadata` the provider attached, returned
    /// by the client (a thinking signature).
    Reasoning {
        text: String,
        metadata: Option<Value>,
    },
    /// `metadata` as above (a Gemini `thoughtSignature`).
    ToolCall {
        call: ToolCall,
        metadata: Option<Value>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub call_id: String,
    pub tool_name: String,
    pub outcome: ResultContent,
}

/// What the model is told about a call.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultContent {
    Output(Value),
    Error(String),
    Denied { reason: Option<String> },
}

/// What a user sets for an upstream model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelOptions {
    pub model: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u64>,
    /// Merged into the request body last, so it can set what toolgate does
    /// not know (`reasoning_effort`, `thinking`, `generationConfig`…); a
    /// `null` removes a key.
    pub extra_body: serde_json::Map<String, Value>,
}

/// Where a body's tool declarations go: `finish_body` writes them there,
/// serialized once per tool set (see [`http::HttpModel`]), in place of a
/// tree of JSON values rebuilt and serialized for every request.
pub(crate) const TOOLS: &str = "tools";

impl ModelOptions {
    /// `body` with the extra keys merged in, as bytes. `tools`, the
    /// declarations' JSON, goes where the body holds [`TOOLS`] as `null`
    /// (an extra `tools` replaces it, as it would the declarations).
    fn finish_body(
        &self,
        mut body: serde_json::Map<String, Value>,
        tools: Option<&[u8]>,
    ) -> Result<Vec<u8>, ProviderError> {
        self.merge_extra(&mut body);
        let failed = |e: serde_json::Error| ProviderError::Request(e.to_string());
        let Some(tools) = tools else {
            return serde_json::to_vec(&body).map_err(failed);
        };
        // What serde_json writes for the map, key by key (`{"k":v,…}`),
        // the declarations copied in as they are.
        let mut out = Vec::with_capacity(256 + tools.len());
        out.push(b'{');
        for (n, (key, value)) in body.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut out, key).map_err(failed)?;
            out.push(b':');
            match value {
                Value::Null if key == TOOLS => out.extend_from_slice(tools),
                value => serde_json::to_writer(&mut out, value).map_err(failed)?,
            }
        }
        out.push(b'}');
        Ok(out)
    }

    /// A body already written as bytes (a JSON object), with the extra keys
    /// merged in: as it is when there are none, the usual case; else read
    /// back into a map, merged as `finish_body` merges, and written again.
    fn finish_written(&self, body: Vec<u8>) -> Result<Vec<u8>, ProviderError> {
        if self.extra_body.is_empty() {
            return Ok(body);
        }
        let failed = |e: serde_json::Error| ProviderError::Request(e.to_string());
        let mut map = serde_json::from_slice(&body).map_err(failed)?;
        self.merge_extra(&mut map);
        serde_json::to_vec(&map).map_err(failed)
    }

    fn merge_extra(&self, body: &mut serde_json::Map<String, Value>) {
        for (key, value) in &self.extra_body {
            match (body.get_mut(key), value) {
                // `null` takes a key out (`max_tokens: null` for a model that wants `max_completion_tokens`).
                (_, Value::Null) => {
                    body.remove(key);
                }
                (Some(Value::Object(into)), Value::Object(from)) => {
                    into.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())))
                }
                _ => {
                    body.insert(key.clone(), value.clone());
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub messages: Vec<ModelMessage>,
    /// Shared by every turn: the registry makes it once.
    pub tools: std::sync::Arc<[ToolSpec]>,
}

/// Each tool as `{"name", "description", <schema>: parameters}`: every
/// API declares a tool so, each with its own name for the schema.
fn tool_declarations(tools: &[ToolSpec], schema: &str) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            serde_json::json!({
                "name": tool.name,
                "description": tool.description,
                schema: tool.parameters,
            })
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StopReason {
    Stop,
    Length,
    ContentFilter,
    ToolCalls,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// One event of a model's streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    TextDelta(DeltaText),
    ReasoningDelta(DeltaText),
    /// Metadata for the reasoning block being streamed, which the provider
    /// needs back on the next request (`{"anthropic": {"signature": …}}`).
    /// Boxed, as the call's metadata: an event is moved several times on
    /// its way to the encoder, and a `Value` inline made every delta 120
    /// bytes.
    ReasoningMetadata(Box<Value>),
    ToolCallStart {
        id: String,
        name: String,
        /// Metadata the provider needs back with this call
        /// (`{"google": {"thoughtSignature": …}}`).
        metadata: Option<Box<Value>>,
    },
    /// A fragment of the call's JSON arguments.
    ToolCallDelta {
        id: String,
        delta: String,
    },
    ToolCallEnd {
        id: String,
    },
    Finish {
        reason: StopReason,
        usage: Usage,
    },
}

/// A model that failed; every variant reaches the client as an `error` chunk.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("model request failed: {0}")]
    Request(String),
    #[error("model stream broke: {0}")]
    Stream(String),
    #[error("{provider} answered HTTP {status}: {message}{}", retry_hint(*.retry_after))]
    Status {
        provider: &'static str,
        status: u16,
        message: String,
        /// Seconds the upstream asked to wait (`retry-after`).
        retry_after: Option<u32>,
    },
    #[error("cannot reach {provider}: {message}")]
    Connect {
        provider: &'static str,
        message: String,
    },
    #[error("{provider} sent nothing for {secs} s")]
    Timeout { provider: &'static str, secs: f32 },
    #[error("{provider} reported an error: {message}")]
    Upstream {
        provider: &'static str,
        message: String,
    },
    #[error("{provider}'s stream ended before its answer finished")]
    Incomplete { provider: &'static str },
}

/// A `data:` URL's bytes in base64 with its media type; `None` for any
/// other URL. Decoded and encoded again, so a percent-encoded or malformed
/// one is caught here rather than by the upstream.
pub(crate) fn inline_data(url: &str) -> Result<Option<(String, String)>, ProviderError> {
    use base64::Engine;
    if !url
        .get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("data:"))
    {
        return Ok(None);
    }
    let bad =
        |why: String| ProviderError::Request(format!("a file's data URL is unreadable: {why}"));
    let data = data_url::DataUrl::process(url).map_err(|e| bad(format!("{e:?}")))?;
    let (bytes, _) = data.decode_to_vec().map_err(|e| bad(format!("{e:?}")))?;
    let mime = data.mime_type();
    let media_type = format!("{}/{}", mime.type_, mime.subtype);
    Ok(Some((
        media_type,
        base64::engine::general_purpose::STANDARD.encode(bytes),
    )))
}

impl ProviderError {
    /// An `error` object the upstream sent inside its stream: its
    /// `message`, else the whole object.
    pub(crate) fn in_stream(provider: &'static str, error: &Value) -> Self {
        let message = match error.get("message").and_then(Value::as_str) {
            Some(message) => message.to_owned(),
            None => error.to_string(),
        };
        ProviderError::Upstream { provider, message }
    }
}

fn retry_hint(retry_after: Option<u32>) -> String {
    match retry_after {
        Some(secs) => format!(" (retry after {secs} s)"),
        None => String::new(),
    }
}

impl ResultContent {
    /// The result as text, for APIs that take a string.
    pub fn text(&self) -> String {
        match self {
            ResultContent::Output(Value::String(text)) => text.clone(),
            ResultContent::Output(value) => value.to_string(),
            ResultContent::Error(message) => message.clone(),
            ResultContent::Denied { reason } => denial_text(reason.as_deref()),
        }
    }

    /// The call failed or was denied.
    pub fn is_error(&self) -> bool {
        !matches!(self, ResultContent::Output(_))
    }
}

/// A model. Dropping the stream cancels the upstream request.
pub trait ModelProvider: Send + Sync + 'static {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>>;

    /// The stream in batches, each the events that were there at once. A
    /// model that makes several at a time (a network read's worth, a
    /// scripted answer) gives them so: the turn then reads each event where
    /// it was made, rather than each moved out through a poll of its own.
    fn batches(&self, request: ModelRequest) -> ModelEvents {
        batched(self.stream(request))
    }

    /// The batches, and what must be shown each of their events and their
    /// end (a [`measured::Measured`] model's count), if anything: for a
    /// reader that sees every event anyway, such as the turn.
    fn watched(&self, request: ModelRequest) -> (ModelEvents, Option<measured::Watch>) {
        (self.batches(request), None)
    }
}

/// A model's response, in batches of the events that came together (each
/// batch has one at least, and at most [`BATCH`]); an error ends it.
pub type ModelEvents = BoxStream<'static, Result<Vec<ProviderEvent>, ProviderError>>;

/// At most this many events are gathered in one batch.
pub const BATCH: usize = 64;

/// `events` in batches: each poll takes every event already there, up to
/// [`BATCH`]. An error read after some events comes on the next poll, and
/// ends the stream.
pub fn batched(
    mut events: BoxStream<'static, Result<ProviderEvent, ProviderError>>,
) -> ModelEvents {
    let mut failed = None;
    let mut ended = false;
    futures::stream::poll_fn(move |cx| {
        if let Some(e) = failed.take() {
            return Poll::Ready(Some(Err(e)));
        }
        if ended {
            return Poll::Ready(None);
        }
        let mut batch = Vec::new();
        while batch.len() < BATCH {
            match events.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(event))) => batch.push(event),
                Poll::Ready(Some(Err(e))) => {
                    ended = true;
                    if batch.is_empty() {
                        return Poll::Ready(Some(Err(e)));
                    }
                    failed = Some(e);
                    break;
                }
                Poll::Ready(None) => {
                    ended = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        match batch.is_empty() {
            true if ended => Poll::Ready(None),
            true => Poll::Pending,
            false => Poll::Ready(Some(Ok(batch))),
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of events (`d` a delta), errors (`e`) and waits (`.`, each
    /// woken at once), read as batches: `[dd] e` is a batch of two deltas,
    /// then the error.
    #[test]
    fn events_are_batched_as_they_are_there() {
        let cases = [
            ("", ""),
            ("ddd", "[ddd]"),
            ("dd.d", "[dd] [d]"),
            (".d..d.", "[d] [d]"),
            ("dde", "[dd] e"),
            ("edd", "e"),
            ("d.e", "[d] e"),
        ];
        for (script, batches) in cases {
            assert_eq!(read_batches(script), batches, "{script}");
        }
        let many = "d".repeat(BATCH + 1);
        let expected = format!("[{}] [d]", "d".repeat(BATCH));
        assert_eq!(read_batches(&many), expected);
    }

    fn read_batches(script: &str) -> String {
        let mut steps: std::collections::VecDeque<char> = script.chars().collect();
        let events = futures::stream::poll_fn(move |cx| match steps.pop_front() {
            Some('d') => Poll::Ready(Some(Ok(ProviderEvent::TextDelta("x".into())))),
            Some('e') => Poll::Ready(Some(Err(ProviderError::Stream("broke".into())))),
            Some(_) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            None => Poll::Ready(None),
        });
        let read = futures::executor::block_on(batched(events.boxed()).collect::<Vec<_>>());
        let read: Vec<String> = read
            .iter()
            .map(|batch| match batch {
                Ok(events) => format!("[{}]", "d".repeat(events.len())),
                Err(_) => "e".to_owned(),
            })
            .collect();
        read.join(" ")
    }

    /// A model's event is moved several times on its way to the encoder,
    /// once a delta: its rare large fields are boxed to keep it small (120
    /// bytes with a call's metadata inline).
    #[test]
    fn an_event_is_small() {
        assert_eq!(
            std::mem::size_of::<Result<ProviderEvent, ProviderError>>(),
            64
        );
    }
}
