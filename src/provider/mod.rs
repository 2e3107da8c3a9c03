//! Model providers: provider-neutral messages in, a stream of
//! [`ProviderEvent`]s out. One file per provider.

pub mod scripted;

use futures::stream::BoxStream;
use serde_json::Value;

pub use scripted::ScriptedModel;

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

/// A call as the model made it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub args: Value,
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

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub messages: Vec<ModelMessage>,
    pub tools: Vec<ToolSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    TextDelta(String),
    ReasoningDelta(String),
    /// Metadata for the reasoning block being streamed, which the provider
    /// needs back on the next request (`{"anthropic": {"signature": …}}`).
    ReasoningMetadata(Value),
    ToolCallStart {
        id: String,
        name: String,
        /// Metadata the provider needs back with this call
        /// (`{"google": {"thoughtSignature": …}}`).
        metadata: Option<Value>,
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

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("model request failed: {0}")]
    Request(String),
    #[error("model stream broke: {0}")]
    Stream(String),
}

/// A model. Dropping the stream cancels the upstream request.
pub trait ModelProvider: Send + Sync + 'static {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>>;
}
